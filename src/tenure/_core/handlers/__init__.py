"""The engine's rules: one function per command, a module per topic (what they act on). [compiled]

Every command handler has the shape ``handler(state, command, now) -> reply``: it
validates ``command`` against ``state``, raising a :mod:`tenure.errors` exception
before it changes anything (rule 1), then changes ``state`` and returns the reply.
Effects for other parties are queued on ``state.effects``. The table that maps each
command type to its handler is :data:`tenure._core.engine.HANDLERS`.

* :mod:`.nodes`: create, describe, alter, drop a node; set and get its annex.
* :mod:`.sessions`: create, attach, detach, close, describe a session; its end.
* :mod:`.acquire`: take a semaphore's tokens, queue for them, or answer BUSY.
* :mod:`.semaphores`: create, release, cancel, renew, update, delete a semaphore.
* :mod:`.sets`: acquire several semaphores, all or none (AcquireAll): an all-or-none set.
* :mod:`.limiters`: reserve units of a rate limiter (its bucket is a semaphore's data).
* :mod:`.handoffs`: offer a hold for adoption, adopt an offered hold (a new token).
* :mod:`.claims`: claim a name for a slot, release a claim by id; a claim's end.
* :mod:`.watches`: describe a semaphore (arming a watch), cancel a watch.
* :mod:`.expiry`: what each kind of deadline does when it comes due.
"""
