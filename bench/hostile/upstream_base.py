"""What the scripted upstreams of the hostile runs share (`upstream` for chat completions,
`upstream_responses` for `/v1/responses`, `upstream_messages` for Anthropic Messages): the headers
that carry a generated request's number and script, the names of the proxy's tools, the artifact
id pattern, the pathological search pattern and the hostile arguments of the `bad_args` script.
"""

from __future__ import annotations

import re

REQUEST_HEADER = "x-hostile-request"
SCRIPT_HEADER = "x-hostile-script"
SEARCH_PATTERN = "A" * 999 + "b"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
READ = "read_context_artifact"
SEARCH = "search_context_artifact"

BAD_ARGUMENTS = (
    '{"artifact_id": "ART", "offset": 1' + "0" * 5000 + "}",
    '{"artifact_id": "ART", "max_chars": 1e400, "max_results": 1e400}',
    '{"artifact_id": "ART", "offset": NaN, "pattern": "a", "max_results": -1}',
    '{"artifact_id": "ART", "offset": -5, "max_chars": 0, "pattern": ""}',
    '{"artifact_id": "ART", "offset": 1.5, "pattern": "' + "a" * 2000 + '"}',
    '{"artifact_id": "ART", "offset": 100000000000000000000, "pattern": "(a+)+$"}',
    '{"artifact_id": 5, "pattern": ["a"]}', '{"artifact_id": null}', "null", "[]", "not json {",
    '{"artifact_id": "art_00000000000000000000000000000000", "pattern": "a"}', "",
    '{"artifact_id": "ART", "artifact_id": "other", "pattern": "\\ud800"}',
)  # fmt: skip
