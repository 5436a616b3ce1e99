"""The dependencies of one app, assembled once in app.py and reached through one typed key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from proxy.auth import Tenant, TenantResolver
from proxy.settings import Settings

if TYPE_CHECKING:
    from proxy.upstream.openai_http import OpenAIHttpUpstream


@dataclass
class Services:
    settings: Settings
    tenants: TenantResolver
    upstreams: dict[str, OpenAIHttpUpstream] = field(default_factory=dict)
    preparer: Any = None
    store: Any = None
    policies: Any = None

    def upstream_for(self, model: str) -> OpenAIHttpUpstream:
        return self.upstreams[self.settings.upstream_for(model).name]


SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
REQUEST_ID: web.RequestKey[str] = web.RequestKey("request_id", str)
TENANT: web.RequestKey[Tenant] = web.RequestKey("tenant", Tenant)
