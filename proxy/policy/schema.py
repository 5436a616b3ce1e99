"""The JSON schema of a policy file (`ctxproxy policy schema` writes `policies/schema.json`)."""

from __future__ import annotations

from typing import Any

from proxy.engine.policy import Policy


def export_schema() -> dict[str, Any]:
    """JSON schema of a policy *file*: `Policy` without `name`, which comes from the file name."""
    schema = Policy.model_json_schema()
    schema.get("properties", {}).pop("name", None)
    if "name" in schema.get("required", []):
        schema["required"].remove("name")
    schema["title"] = "ctxproxy policy"
    schema["description"] = (
        "One ctxproxy policy file (policies/<name>.yaml). Generated from proxy/engine/policy.py "
        "by `ctxproxy policy schema`; do not edit by hand."
    )
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
