"""The dashboard over https, in Chromium: the page, the login and a Secure cookie.

In a module of its own: its ``browser`` fixture (playwright's sync API) keeps an
event loop running in the test thread for the module, where an asyncio test cannot
run (tests/dashboard/test_login_tickets_served.py has those).
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.dashboard.test_login_tickets_served import READER, serve
from tests.server.wire import WAIT

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(60)


def test_the_page_over_https_in_chromium(tmp_path: Path, browser: Browser) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    tmp_path.mkdir(parents=True, exist_ok=True)
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    tls = (
        "--http-tls-cert",
        str(tmp_path / "cert.pem"),
        "--http-tls-key",
        str(tmp_path / "key.pem"),
    )
    for http in serve(tmp_path, *tls):
        # The certificate served is ours, and verifies against the test's CA.
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with (
            socket.create_connection(("127.0.0.1", http), timeout=WAIT) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls_sock,
        ):
            served = tls_sock.getpeercert(binary_form=True)
            assert served == ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
        # Chromium has no store of ours to trust: the certificate was checked above.
        page_context = browser.new_context(ignore_https_errors=True)
        page_context.set_default_timeout(WAIT * 1000)
        try:
            page = page_context.new_page()
            page.goto(f"https://127.0.0.1:{http}/")
            page.wait_for_selector("form#login:not([hidden])")
            page.fill("#secret", READER)
            page.click("form#login button")
            page.wait_for_selector("#access:text-is('token reader (read-only)')")
            [cookie] = page_context.cookies()
            assert cookie["name"] == "tenure_dashboard"
            assert cookie["secure"]
            assert cookie["httpOnly"]
            assert cookie["sameSite"] == "Strict"
            assert READER not in cookie["value"]
            page.wait_for_selector("#live.on")  # the event stream, over https too
        finally:
            page_context.close()
