"""``dict://NAME``: a third party's backend over plain dicts, with only the core.

What a backend of another package looks like when it implements the backend
session's core (:class:`tenure.backends.CoreSession`) and no ability: it imports
only public names (``tenure``, ``tenure.errors``, ``tenure.backends``), is
registered under the ``tenure.backends`` entry-point group as a third party's is
(``site/``: the metadata pip would write, put on ``sys.path`` by
``tests/conftest.py``), and the conformance kit runs on it in the unit tier
(``tests/api/harness.py``'s ``DictHarness``): every module that needs no ability
passes, and what needs one skips, naming the capability.

Its parts: :mod:`.state` (nodes, semaphores, their holders and FIFO queues, in
dicts and lists), :mod:`.session` (a session: the ten members of the core, and its
watches), :mod:`.backend` (the ``Backend``: nodes, sessions, listings;
``open_backend``). State is shared by name within this process, as
``memory://NAME``'s is.
"""
