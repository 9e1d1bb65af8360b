"""A reentrant mutex: code that nests calls under one lock says "this is mine already".

``transfer`` takes the ledger's lock and calls ``debit`` and ``credit``, which take
it too, because they are also called on their own. With ``reentrant=True`` the
task that holds the lock gets it again at once: one hold, one fencing token, and the
lock is released when the outermost block leaves. Another session, or another task
of the same session, waits as for any lock. The same code runs on every backend.

Run it with::

    python examples/reentrant.py                                     # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/reentrant.py  # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/reentrant.py    # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import os

import tenure
from tenure.errors import LimitExceededError, PreconditionFailedError

NODE = "reentrant-demo"


class Ledger:
    """Balances guarded by the reentrant mutex 'ledger'; each step takes the lock."""

    def __init__(self, session: tenure.Session, rival: tenure.Session) -> None:
        self.session, self.rival = session, rival
        self.balances = {"alice": 100, "bob": 0}
        self.tokens: list[int] = []  # the token each step wrote under

    def lock(self) -> tenure.Mutex:
        return self.session.mutex("ledger", reentrant=True)

    async def debit(self, account: str, amount: int) -> None:
        async with self.lock() as lock:  # nested in transfer(): at once, the same hold
            self.tokens.append(lock.token)
            self.balances[account] -= amount

    async def credit(self, account: str, amount: int) -> None:
        async with self.lock() as lock:
            self.tokens.append(lock.token)
            self.balances[account] += amount

    async def transfer(self, source: str, target: str, amount: int) -> int:
        async with self.lock() as lock:
            self.tokens.append(lock.token)
            await self.debit(source, amount)
            await self.credit(target, amount)
            # Inner blocks left, the lock is still this task's:
            taken = await self.rival.mutex("ledger").try_lock()
            print(f"transfer: after debit and credit, the other session's try_lock(): {taken}")
            return lock.token


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://reentrant"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        s, rival = await one.session(NODE), await two.session(NODE)

        async with s.mutex("job", reentrant=True) as a, s.mutex("job", reentrant=True) as b:
            assert a.token == b.token
            print(f"job: two nested blocks, one token: {a.token == b.token}")
            [owner] = (await rival.semaphore("job").describe(owners=True)).owners
            print(f"job: one owner in the store, with that token: {owner.token == a.token}")

        ledger = Ledger(s, rival)
        token = await ledger.transfer("alice", "bob", 30)
        one_token = set(ledger.tokens) == {token}
        print(f"ledger: {ledger.balances}, every step under one token: {one_token}")
        after = await rival.mutex("ledger").lock(timeout=10)
        greater = after.token > token
        print(
            f"ledger: the other session got it after the outermost block, greater token: {greater}"
        )
        await after.release()

        async with s.mutex("ledger", reentrant=True) as held:
            # A task of its own is another caller: it does not share the hold.
            other_task = await asyncio.create_task(s.mutex("ledger", reentrant=True).try_lock())
            print(f"ledger: another task of the same session, try_lock(): {other_task}")
            try:
                await s.mutex("ledger").lock()  # a plain acquire nested in a reentrant hold
            except PreconditionFailedError:
                print("ledger: a plain lock() inside the reentrant hold: PreconditionFailedError")
            print(f"ledger: still held: {held.held}")

        shallow = s.mutex("ledger", reentrant=True, max_depth=2)
        async with shallow, shallow:
            try:
                await shallow.lock()
            except LimitExceededError:
                print("ledger: a third nested acquire with max_depth=2: LimitExceededError")

        await s.close()
        await rival.close()
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
