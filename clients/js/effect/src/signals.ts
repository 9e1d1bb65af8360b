/**
 * `onPermitsReleased(key)`: the signals a waiter tries again on. Every change of the
 * semaphore's owners (a release among them) is pushed by the server (a watch, armed
 * again across lost connections), and a granted place wakes the streams of its scope
 * (`places.ts`). The stream is also what keeps a waiter's place: it runs, in the
 * waiter's scope, exactly while the waiter waits, and its end gives the scope's places
 * on the key back before the waiter's fiber goes on.
 */
import { Context, Effect, Option, Scope, Stream } from "effect";
import type { Session } from "tenure-client";
import type { Places } from "./places.js";

/** The signals of `key` (the semaphore `name`) for a waiter of `session`. */
export function permitsReleased(session: Session, places: Places, key: string, name: string): Stream.Stream<void> {
  // The waiter's scope is read where the stream runs: in the push fiber of the
  // waiter's `take`, whose context holds the scope its poll fiber's tries run in.
  return Stream.unwrap(
    Effect.map(Effect.context<never>(), (context) => {
      const scope = Option.getOrNull(Context.getOption(context, Scope.Scope));
      return Stream.asyncPush<void>((emit) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const wake = (): void => void emit.single(undefined);
            const end = scope === null ? async (): Promise<void> => undefined : places.open(key, scope, wake);
            const watch = session.semaphore(name).watch({ owners: true });
            void (async () => {
              try {
                for await (const _ of watch) wake();
              } catch {
                // The session ended: one more signal makes the waiter try, and its try
                // says why (the stream itself never fails: the library's contract).
                wake();
              }
            })();
            return { watch, end };
          }),
          ({ watch, end }) =>
            Effect.promise(async () => {
              await watch.return();
              await end();
            }),
        ),
      );
    }),
  );
}
