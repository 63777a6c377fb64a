"""Students identified by JupyterHub: the service asks the Hub whose API token a request carries.

On a JupyterHub the service runs as a Hub service (see the README); the Hub gives it
JUPYTERHUB_API_URL. A student's single-user server holds the student's own API token
(JUPYTERHUB_API_TOKEN), which layerlab sends as `Authorization: token <api token>`. The service
asks the Hub's REST API (`GET {api}/user`) whose token it is and uses the user name as the
student id; answers are cached for CACHE_S seconds, keyed by a hash of the token.
"""

from __future__ import annotations

import hashlib
import json
import time

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from grader.service.tokens import STUDENT_ID

CACHE_S = 300
TIMEOUT_S = 10


class HubUnavailable(Exception):
    """The Hub could not say whose token it is; the message says why."""


class HubIdentity:
    """`await HubIdentity(api_url).user(token)` -> the Hub user name, or None when the Hub refuses it."""

    def __init__(self, api_url: str, clock=time.monotonic):
        self.api_url = api_url.rstrip("/")
        self.clock = clock
        self._cache: dict[str, tuple[str | None, float]] = {}

    async def user(self, token: str) -> str | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > self.clock():
            return cached[0]
        request = HTTPRequest(
            f"{self.api_url}/user",
            headers={"Authorization": f"token {token}"},
            request_timeout=TIMEOUT_S,
            connect_timeout=TIMEOUT_S,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as error:
            if error.code in (401, 403, 404):
                self._cache[key] = (None, self.clock() + CACHE_S)
                return None
            raise HubUnavailable(f"the Hub answered HTTP {error.code}") from None
        except OSError as error:
            raise HubUnavailable(f"the Hub cannot be reached: {error}") from None
        try:
            name = json.loads(response.body).get("name")
        except (ValueError, AttributeError):
            raise HubUnavailable("the Hub's answer is not a user") from None
        name = name if type(name) is str and STUDENT_ID.fullmatch(name) else None
        self._cache[key] = (name, self.clock() + CACHE_S)
        return name
