"""The asyncio runtime: the host, which drives an engine on a clock and routes its effects.

:class:`~tenure._runtime.host.Host` owns one :class:`~tenure._core.Engine`,
applies commands to it at the time a :class:`~tenure._runtime.clock.Clock` gives,
wakes it at its next deadline, and hands each effect to the sink of the session it
is addressed to. ``memory://`` (:mod:`tenure.backends.memory`) runs one in the
client's process, with no journal; ``tenure serve`` runs one given a journal and a
writer (:mod:`tenure.server._server_host`), so that its every change is journaled
and group-committed. Nothing here adds semantics: the rules are all in
:mod:`tenure._core`.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core and
tenure.errors.
"""
