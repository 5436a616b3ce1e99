"""OpenAI Chat Completions (`/v1/chat/completions`): the first wire-format adapter."""

from proxy.formats.openai_chat.fields import request_model, request_stream
from proxy.formats.openai_chat.request import OPENAI_CHAT, OpenAIChat

__all__ = ["OPENAI_CHAT", "OpenAIChat", "request_model", "request_stream"]
