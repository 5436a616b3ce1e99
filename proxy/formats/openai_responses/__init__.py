"""OpenAI Responses (`/v1/responses`): the `input` items through the same engine."""

from proxy.formats.openai_responses.fields import provider_history
from proxy.formats.openai_responses.request import OPENAI_RESPONSES, OpenAIResponses

__all__ = ["OPENAI_RESPONSES", "OpenAIResponses", "provider_history"]
