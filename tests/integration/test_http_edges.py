"""URL and HTTP protocol edges (issue 9): one strict routing rule, HTTP/2 request lines refused
with 505, HTTP/0.9-style lines answered 400 at once. Real gateway subprocess over real TLS."""

from __future__ import annotations

import base64
import socket
import ssl

import pytest

from tests.support.gateway import service

pytestmark = pytest.mark.integration

AUTH = base64.b64encode(b"admin:admin-password").decode()
BODY = b'[1,"get_all_databases",1,1,{}]'
CANONICAL = "/gateway/default/hmshttpthrift/api/hms"


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory):
    # A long header deadline: a prompt answer below cannot be the slow-loris guard's doing.
    return module_gateway_factory(services=[service([f"thrift://127.0.0.1:{hms.port}"])],
                                  limits={"client_header_timeout_seconds": 120})


def exchange(gw, raw: bytes) -> bytes:
    """Send ``raw`` on a fresh TLS connection; everything the gateway sends until it closes."""
    ctx = ssl.create_default_context(cafile=str(gw.ca_file))
    with socket.create_connection(("127.0.0.1", gw.port), timeout=20) as tcp:
        with ctx.wrap_socket(tcp, server_hostname="localhost") as tls:
            tls.sendall(raw)
            chunks = []
            while chunk := tls.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def request(target: str, version: str = "HTTP/1.1") -> bytes:
    return (f"POST {target} {version}\r\nHost: localhost\r\nAuthorization: Basic {AUTH}\r\n"
            f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n").encode() + BODY


def status_line(response: bytes) -> bytes:
    return response.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("target", [
    CANONICAL,
    CANONICAL + "?anything=1",  # the query string is not part of the path
    "https://localhost" + CANONICAL,  # absolute form, RFC 9112 §3.2.2
])
def test_the_canonical_path_is_served(gateway, target):
    response = exchange(gateway, request(target))
    assert status_line(response) == b"HTTP/1.1 200 OK"
    assert b'"get_all_databases",2,1' in response


@pytest.mark.parametrize("target", [
    CANONICAL + "/",
    "/gateway/default/hmshttpthrift%2fapi%2fhms",
    "/gateway/%64efault/hmshttpthrift/api/hms",
    "/gateway/default/hmshttpthrift/api/%68ms",
    "/gateway/default//hmshttpthrift/api/hms",
    "/gateway/default/hmshttpthrift/./api/hms",
    "/gateway/default/hmshttpthrift/x/../api/hms",
    "/gateway//default/hmshttpthrift/api/hms",
    "https://localhost/gateway/default/hmshttpthrift/api/hms/",
    "/Gateway/default/hmshttpthrift/api/hms",
])
def test_any_other_spelling_of_the_path_is_404(gateway, target):
    assert status_line(exchange(gateway, request(target))) == b"HTTP/1.1 404 Not Found"


def test_a_request_line_claiming_http_2_is_505_in_http_1_1(gateway):
    """aiohttp's parser itself answers 400 to other versions it cannot read (HTTP/1.2, 3.0)."""
    response = exchange(gateway, request(CANONICAL, "HTTP/2.0"))
    assert status_line(response) == b"HTTP/1.1 505 HTTP Version Not Supported"


@pytest.mark.parametrize("line", [b"GET /\r\n", b"GET /\n", b"\r\nPOST " + CANONICAL.encode() + b"\r\n",
                                  b"garbage\r\n"])
def test_a_request_line_without_version_is_answered_400_at_once(gateway, line):
    response = exchange(gateway, line)  # the connection stays open on the client's side
    assert status_line(response) == b"HTTP/1.1 400 Bad Request"
    assert b"\r\nX-Request-Id: " in response.split(b"\r\n\r\n", 1)[0]


SECRET = b"c2VjcmV0LWNyZWRlbnRpYWw"  # what a leaked credential would look like in the answer


def head_and_body(response: bytes) -> tuple[bytes, bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    return head, body


@pytest.mark.parametrize("authorization", [
    b"Basic " + SECRET + b"\r\n folded-" + SECRET,  # obs-fold (RFC 9112 §5.2 forbids it)
    b"Basic " + SECRET * 400,  # over aiohttp's 8,190-byte field limit
    b"Basic " + SECRET + b"\x00",
])
def test_a_header_the_parser_refuses_gets_a_one_line_reason_without_its_bytes(gateway, authorization):
    raw = (b"POST " + CANONICAL.encode() + b" HTTP/1.1\r\nHost: localhost\r\nAuthorization: "
           + authorization + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY) + BODY)
    head, body = head_and_body(exchange(gateway, raw))
    assert head.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert b"\r\nX-Request-Id: " in head
    assert SECRET not in head + body
    assert body.count(b"\n") == 1 and body.startswith((b"malformed ", b"request line or header too long"))


def test_two_authorization_headers_are_refused_before_any_step(gateway):
    other = base64.b64encode(b"admin:wrong").decode()
    raw = (f"POST {CANONICAL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic {AUTH}\r\n"
           f"Authorization: Basic {other}\r\nContent-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
           ).encode() + BODY
    head, body = head_and_body(exchange(gateway, raw))
    assert status_line(head) == b"HTTP/1.1 400 Bad Request"
    assert b"\r\nX-Request-Id: " in head
    assert body == b"more than one Authorization header\n"


@pytest.mark.parametrize("name", [b"Cookie", b"Content-Type"])  # the gateway's check, aiohttp's
def test_other_headers_that_must_be_single_are_refused_when_repeated(gateway, name):
    raw = request(CANONICAL).replace(b"Connection: close\r\n", name + b": a=1\r\n" + name + b": b=2\r\n"
                                     b"Connection: close\r\n")
    head, body = head_and_body(exchange(gateway, raw))
    assert status_line(head).endswith(b" 400 Bad Request")
    assert b"\r\nX-Request-Id: " in head
    assert body in (b"more than one %s header\n" % name, b"a header field that must be single is repeated\n")
