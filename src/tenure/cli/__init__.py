"""The ``tenure`` command: a module per command group, joined in :mod:`tenure.cli.app`.

* :mod:`tenure.cli.hold`: ``lock``, ``elect`` (run a command while held; the child
  supervision they share is :mod:`tenure.cli._supervise`);
* :mod:`tenure.cli.election`: ``leader``, ``observe``;
* :mod:`tenure.cli.listing`: ``ls``, ``describe``, ``sessions``, ``watch``, ``kill-session``;
* :mod:`tenure.cli.nodes`: ``node create|describe|alter|drop``;
* :mod:`tenure.cli.server`: ``serve``, ``migrate`` (argparse, no click needed), ``demo``.

Every failure is one line on stderr and an exit status of
:class:`tenure.cli._status.Status`
(docs/operations.md, "The tenure command").

Layer (CONTRIBUTING.md): its modules may import each other, tenure.__init__,
tenure._build, tenure.client.__init__, tenure._core.values, tenure._core.why_report,
tenure._core.top_report, tenure._core.kinds, tenure._core.kind_render,
tenure._core.members and tenure.errors.
"""
