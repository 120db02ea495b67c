"""Who passes the TensorBoard gate (tfk8s_train.token_gate): the tenant's token, and the session
cookie the gate trades it for.

Every tenant's apps share one host (the User Node) and differ by port, and browsers send a host's
cookies to every port of it. So the cookie is the tenant's own in name and in value: it is called
`tfk8s-tensorboard-<tenant>`, and its value is an HMAC keyed by the tenant's token over the tenant's
name and an expiry, `<expiry>.<hex digest>`. Another tenant's cookie is never valid here, even were
the tokens equal, and no cookie outlives its expiry, whatever the browser keeps.

Standard library only: the gate runs in the TensorFlow image's Python.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

COOKIE_PREFIX = "tfk8s-tensorboard-"
# A tenant's name is a DNS-1035 label (tfk8s.schema_tenant): a cookie name may hold it as it is.
TENANT_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def cookies(header: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a Cookie header, in order; a name may come more than once (the
    browser sends every cookie of that name whose path matches)."""
    pairs = []
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            pairs.append((name, value.strip('"')))
    return pairs


@dataclass(frozen=True, kw_only=True)
class Session:
    """The tenant's token, and the cookie that stands for it for `max_age` seconds."""

    tenant: str
    token: str
    max_age: int  # seconds a cookie is valid, at the browser (Max-Age) and here (its signed expiry)

    def __post_init__(self) -> None:
        if not TENANT_NAME.fullmatch(self.tenant):
            raise ValueError(f"--tenant {self.tenant!r}: must be the tenant's name, a DNS-1035 label (e.g. alice)")
        if not self.token:
            raise ValueError("TFK8S_TOKEN is empty: refusing to serve TensorBoard without a token")
        if self.max_age <= 0:
            raise ValueError(f"--session-max-age {self.max_age}: must be a positive number of seconds (e.g. 43200, 12 h)")

    @property
    def cookie_name(self) -> str:
        return f"{COOKIE_PREFIX}{self.tenant}"

    def _digest(self, expires: int) -> str:
        message = f"tfk8s-tensorboard\0{self.tenant}\0{expires}".encode()
        return hmac.new(self.token.encode(), message, hashlib.sha256).hexdigest()

    def cookie_value(self, now: float) -> str:
        """A new session's cookie value, valid until `now` + max_age (a digest: a leaked cookie is not the token)."""
        expires = int(now) + self.max_age
        return f"{expires}.{self._digest(expires)}"

    def set_cookie(self, now: float) -> str:
        """The Set-Cookie header of a new session: for this gate's whole site (Path=/), never for
        scripts (HttpOnly), never on requests from other sites (SameSite=Strict), and gone after max_age."""
        return f"{self.cookie_name}={self.cookie_value(now)}; Max-Age={self.max_age}; Path=/; HttpOnly; SameSite=Strict"

    def valid_cookie(self, value: str, now: float) -> bool:
        """Whether `value`, sent under this tenant's cookie name, is a session of this tenant's token
        that has not expired."""
        expires, _, digest = value.partition(".")
        if not (expires.isascii() and expires.isdigit()) or not now < int(expires) <= now + self.max_age:
            return False
        return hmac.compare_digest(digest.encode(), self._digest(int(expires)).encode())

    def has_session(self, cookie_header: str, now: float) -> bool:
        """Whether the Cookie header holds a valid session of this tenant; cookies of other names
        (other tenants' gates, any Jupyter's) are not looked at."""
        return any(name == self.cookie_name and self.valid_cookie(value, now) for name, value in cookies(cookie_header))

    def is_token(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.token.encode())
