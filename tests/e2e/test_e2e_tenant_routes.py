"""Routes per tenant end to end: a tenant's own routes pick its upstream before the global ones."""

from __future__ import annotations

import openai
from fakes import FakeUpstream, completion
from proxy_harness import make_settings, start_proxy

CHAT = "/v1/chat/completions"


async def test_each_tenant_reaches_the_upstream_its_routes_name(
    fake_upstream: FakeUpstream,
) -> None:
    async with FakeUpstream() as dedicated:
        settings = make_settings(
            fake_upstream.base_url,
            upstreams=[
                {"name": "shared", "base_url": fake_upstream.base_url},
                {"name": "dedicated", "base_url": dedicated.base_url},
            ],
            auth={"mode": "keys"},
            tenants=[
                {
                    "name": "acme",
                    "keys": ["sk-acme"],
                    "upstream_key": "up-acme",
                    "routes": [{"model": "gpt-4o*", "upstream": "dedicated"}],
                },
                {"name": "globex", "keys": ["sk-globex"], "upstream_key": "up-globex"},
            ],
        )
        proxy = await start_proxy(settings)
        try:
            dedicated.enqueue(completion("from dedicated"), path=CHAT)
            fake_upstream.enqueue_many(
                completion("from shared"), completion("shared again"), path=CHAT
            )
            messages = [{"role": "user", "content": "hi"}]
            answers = {}
            for key, model in (("sk-acme", "gpt-4o"), ("sk-globex", "gpt-4o"), ("sk-acme", "o3")):
                async with openai.AsyncOpenAI(
                    base_url=proxy.base_url, api_key=key, max_retries=0
                ) as sdk:
                    answer = await sdk.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
                answers[(key, model)] = answer.choices[0].message.content
        finally:
            await proxy.stop()
    assert answers == {
        ("sk-acme", "gpt-4o"): "from dedicated",
        ("sk-globex", "gpt-4o"): "from shared",
        ("sk-acme", "o3"): "shared again",  # no route of its own matches: the global default
    }
    assert [r.headers["Authorization"] for r in dedicated.requests(CHAT)] == ["Bearer up-acme"]
    assert [r.headers["Authorization"] for r in fake_upstream.requests(CHAT)] == [
        "Bearer up-globex",
        "Bearer up-acme",
    ]
