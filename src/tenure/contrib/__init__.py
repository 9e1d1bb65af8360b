"""tenure where Python teams already are: integrations, each an extra (docs/integrations.md).

Each module here is a short adapter over tenure's public API (no private module of
tenure: ``tests/contrib/test_public_only.py`` reads every import), and imports its
third-party package, which its extra installs, at the top: importing
an integration without its extra (``tenure[X]``) fails at once, naming the
package, instead of half working.

Layer (CONTRIBUTING.md): its modules may import each other, tenure.__init__,
tenure.client.__init__, tenure.backends.__init__, tenure.sync.__init__,
tenure.fencing.__init__, tenure.testing and tenure.errors.
"""
