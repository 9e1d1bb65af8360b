"""Tests of the deployment kit in ``deploy/`` (docs/deploy.md)."""
