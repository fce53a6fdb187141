"""One HTTP request of the server judges, with what a hostile or broken server cannot get past.

Standard library only (``http.client``), one connection per request, and:

- ``timeout`` bounds the whole request (connect, send, headers, body): a watchdog shuts the
  socket down at the deadline, so a server trickling one byte a second cannot hold a worker;
- the answer is read up to ``max_bytes`` (a larger ``Content-Length`` is refused before
  reading; an endless chunked body is cut at the cap): memory stays bounded;
- redirects are never followed (the API key would go along to wherever they point): a 3xx
  status is returned to the caller, which reports it;
- credentials in a URL (``user:password@``) are refused by :func:`parse_base_url` and
  :func:`redact` keeps them out of every message;
- proxies from the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) are honoured as ``urllib``
  does (``https`` through a ``CONNECT`` tunnel).

Failures are :class:`TransportError`: ``kind`` is ``"dns"`` (the host name does not resolve),
``"refused"`` (nothing listens), ``"timeout"``, ``"too-large"`` or ``"broken"`` (reset,
truncated body, an answer that is not HTTP).
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Mapping

_READ = 1 << 16
ERROR_BODY_BYTES = 1 << 16  # of an error answer, only the message is wanted


class TransportError(Exception):
    """The request got no usable HTTP answer (``kind``: see the module docstring)."""

    def __init__(self, kind: str, why: str):
        super().__init__(why)
        self.kind = kind
        self.why = why


@dataclass(frozen=True)
class Reply:
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


def redact(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@`` (for messages)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, credentials, path and query left out (for messages)."""
    try:
        parts = urllib.parse.urlsplit(url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else "a relative address"
    except ValueError:
        return "<unparsable URL>"


def parse_base_url(url: str, label: str, source: str) -> str:
    """``url`` checked: ``http(s)://host[:port][/path]``, no credentials; one-line ValueError
    naming ``label`` and where the URL came from (``source``) otherwise, the URL redacted."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a non-numeric or out-of-range port
    except ValueError:
        raise ValueError(f"{label} base_url ({source}) is not a URL: {redact(url)!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{label} base_url ({source}) must be http://HOST[:PORT]/... or https://..., got {redact(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{label} base_url ({source}) holds credentials ({redact(url)!r}); capeval does not send "
                         f"them: pass the key as api_key (or $CAPEVAL_{label.upper().replace('-', '_')}_API_KEY)")
    if parts.query or parts.fragment:
        raise ValueError(f"{label} base_url ({source}) must not have a query or fragment: {origin(url)}{parts.path}")
    del port
    return url.rstrip("/")


def _proxy(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """``(host, port, headers)`` of the environment's proxy for ``scheme`` unless ``host`` bypasses it."""
    url = urllib.request.getproxies().get(scheme)
    if not url or urllib.request.proxy_bypass(host):
        return None
    parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    headers = {}
    if parts.username is not None:
        cred = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode("ascii")
    return parts.hostname or "", parts.port or 8080, headers


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """The (unconnected) connection for ``url``, the request target and extra headers."""
    parts = urllib.parse.urlsplit(url)
    host, https = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    target = parts.path or "/"
    proxy = _proxy(parts.scheme, host)
    context = ssl.create_default_context() if https else None
    if proxy is None:
        conn = (http.client.HTTPSConnection(host, port, timeout=timeout, context=context) if https
                else http.client.HTTPConnection(host, port, timeout=timeout))
        return conn, target, {}
    p_host, p_port, p_headers = proxy
    if https:  # a CONNECT tunnel: the proxy sees only the host name
        conn = http.client.HTTPSConnection(p_host, p_port, timeout=timeout, context=context)
        conn.set_tunnel(host, port, headers=p_headers)
        return conn, target, {}
    conn = http.client.HTTPConnection(p_host, p_port, timeout=timeout)
    return conn, urllib.parse.urlunsplit(parts._replace(query="", fragment="")), p_headers


def _read_capped(resp: http.client.HTTPResponse, max_bytes: int, label: str) -> bytes:
    parts: list[bytes] = []
    n = 0
    while True:
        chunk = resp.read(_READ)
        if not chunk:
            return b"".join(parts)
        n += len(chunk)
        if n > max_bytes:
            raise TransportError("too-large", f"the answer is larger than {max_bytes / 2**20:g} MB "
                                 f"(option {label}.max_response_mb)")
        parts.append(chunk)


def send(method: str, url: str, data: bytes | None, headers: Mapping[str, str], timeout: float,
         max_bytes: int, label: str = "visce2") -> Reply:
    """One request; the answer's body read up to ``max_bytes`` (error answers: up to 64 KB).

    Raises :class:`TransportError`; an HTTP error status is a :class:`Reply` like any other.
    """
    conn, target, extra = _connection(url, timeout)
    expired = threading.Event()

    def expire() -> None:  # the deadline of the whole request: wake the blocked read
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket, under any TLS layer
            except OSError:
                pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()
        if expired.is_set():
            raise TimeoutError
        conn.request(method, target, body=data, headers={**headers, **extra})
        resp = conn.getresponse()
        status = resp.status
        cap = max_bytes if 200 <= status < 300 else min(max_bytes, ERROR_BODY_BYTES)
        # the body length http.client read from Content-Length (None: chunked, absent or not a
        # number, e.g. 5,000 digits or "²"): the one it stops reading at, so the one checked here
        length = resp.length if isinstance(resp.length, int) else None
        if length is not None and length > max_bytes and 200 <= status < 300:
            shown_length = f"{length:,}" if length < 10**18 else f"a {len(str(length)):,}-digit number of"
            raise TransportError("too-large", f"the answer announces {shown_length} bytes, more than "
                                 f"{max_bytes / 2**20:g} MB (option {label}.max_response_mb)")
        try:
            body = _read_capped(resp, cap, label)
        except TransportError:
            if cap == max_bytes:
                raise
            body = b""  # an oversized error body: the status alone decides
        else:  # read with a size, http.client returns a body cut short without a word
            if length is not None and len(body) < length:
                raise TransportError("broken", f"broken answer (IncompleteRead: {len(body)} of {length} bytes)")
        return Reply(status, resp.reason or "", {k.lower(): v for k, v in resp.getheaders()}, body)
    except TransportError:
        raise
    except socket.gaierror as exc:
        host = urllib.parse.urlsplit(url).hostname
        raise TransportError("dns", f"cannot resolve the host name {host!r} ({exc.strerror or exc})") from None
    except ConnectionRefusedError:
        raise TransportError("refused", "connection refused") from None
    except (TimeoutError, http.client.HTTPException, OSError, ValueError) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise TransportError("timeout", f"no complete answer within timeout={timeout:g} s") from None
        # http.client's ValueErrors quote the header value (the API key): the type alone
        why = "" if isinstance(exc, ValueError) else " ".join(str(exc).split())[:120]
        raise TransportError("broken", f"broken answer ({type(exc).__name__}{': ' + why if why else ''})") from None
    finally:
        watchdog.cancel()
        conn.close()
