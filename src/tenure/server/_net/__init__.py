"""The server's connections: what comes in on a socket, and what goes back out.

* :mod:`~tenure.server._net.listen`: the accept loop, which stops accepting at
  ``--max-handshaking``, and the counts of accepted connections;
* :mod:`~tenure.server._net.accept`: each connection of the main port, native or the
  accepted face's by its first byte, served in fair turns;
* :mod:`~tenure.server._net.native`: the native face: the native protocol's messages,
  one at a time;
* :mod:`~tenure.server._net.gate`: the handshake, tokens, authorization, and the
  handshake, idle and silence timeouts of each connection;
* :mod:`~tenure.server._net.auth`: the auth file and the policy;
* :mod:`~tenure.server._net.tls`: TLS and mutual TLS;
* :mod:`~tenure.server._net.outbox`: what each connection is owed, written only after
  the commit that covers it.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._protocol, tenure.server._config, tenure.server._role and tenure.errors.
"""
