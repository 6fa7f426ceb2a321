"""Failed token attempts on Lantern's local servers (``lantern ui --token``, ``lantern serve --token``): the one
limit both apply.

A client may present a wrong token at most ``LIMIT`` times in ``WINDOW_S`` seconds. Past that, every request of
that client that presents a token (right or wrong: a guess is never checked) gets 429 with ``Retry-After`` until its
oldest failure leaves the window. Requests that present no token (a first visit, the login page) are not counted.
Guessing a ``secrets.token_urlsafe`` token at 10 tries a minute is hopeless; a client that only mistyped waits a
minute at most. The client is the socket's peer address (the servers run uvicorn without ``proxy_headers``: there
is no trusted proxy, and ``X-Forwarded-For`` is the client's to write); every loopback address (127.0.0.0/8, ::1,
::ffff:127.x) is one client, this host, so rotating the source over 127.0.0.0/8 gets no more guesses than one
address. Other addresses (a server bound beyond loopback) are unaffected by one another's failures until all of
them together reach ``GLOBAL_LIMIT`` in the window: then every token presented waits, so no number of addresses,
nor their eviction from memory, buys more guesses than that. Memory is bounded: at most ``MAX_CLIENTS`` addresses
are remembered, the least recent dropped first (the global count keeps their failures). Our rule (OWASP's
Authentication Cheat Sheet advises throttling failed attempts per source and overall).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

LIMIT = 10  # failed attempts per address per window (ours)
WINDOW_S = 60.0  # seconds (ours)
MAX_CLIENTS = 10_000  # addresses remembered (ours)
GLOBAL_LIMIT = 5 * LIMIT  # failed attempts of all clients together per window (ours)
LOOPBACK = "loopback"  # the one client every loopback address is


def client_of(host: str) -> str:
    """The client a peer address ``host`` counts as: ``LOOPBACK`` for every loopback address (IPv4 127.0.0.0/8,
    IPv6 ::1, IPv4-mapped ::ffff:127.x), else the address as given."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    mapped = getattr(address, "ipv4_mapped", None)
    return LOOPBACK if (mapped or address).is_loopback else host


class FailureLimit:
    """Per-client failed-attempt counts in a sliding window, and all clients' together (module docstring). A
    client is a peer address, ``client_of`` applied. ``clock``: seconds, monotonic."""

    def __init__(
        self,
        limit: int = LIMIT,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
        global_limit: int = GLOBAL_LIMIT,
    ):
        self.limit, self.window_s, self.clock, self.max_clients = limit, window_s, clock, max_clients
        self.global_limit = global_limit
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque()  # the latest failures of every client, at most ``global_limit``
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before a token it presents is checked again; 0.0 when it may try now."""
        with self._lock:
            now = self.clock()
            waits = [0.0]
            times = self._recent(client_of(client))
            if times is not None and len(times) >= self.limit:
                waits.append(times[0] + self.window_s - now)
            while self._all and self._all[0] <= now - self.window_s:
                self._all.popleft()
            if len(self._all) >= self.global_limit:
                waits.append(self._all[0] + self.window_s - now)
            wait = max(waits)
            return max(0.001, wait) if wait > 0 else 0.0

    def failed(self, client: str) -> None:
        """Count a wrong token presented by ``client``."""
        client = client_of(client)
        with self._lock:
            now = self.clock()
            times = self._recent(client)
            if times is None:
                times = self._failures[client] = deque()
                while len(self._failures) > self.max_clients:
                    self._failures.popitem(last=False)
            self._failures.move_to_end(client)
            times.append(now)
            while len(times) > self.limit:
                times.popleft()
            self._all.append(now)
            while len(self._all) > self.global_limit:
                self._all.popleft()

    def _recent(self, client: str) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        now = self.clock()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times
