"""The environment variables that name the API key and the endpoint of Together's API.

A leaf of the compute API client (standard library only): the client reads them when it is given no key or
URL, and the dynamic provider's settings (:mod:`.settings`) and messages name them.
"""

from __future__ import annotations

API_KEY_ENV = "TOGETHER_API_KEY"
BASE_URL_ENV = "TOGETHER_BASE_URL"
