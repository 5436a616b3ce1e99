"""Anthropic Messages (`/v1/messages`): the second wire-format adapter."""

from proxy.formats.anthropic_messages.request import ANTHROPIC_MESSAGES, AnthropicMessages

__all__ = ["ANTHROPIC_MESSAGES", "AnthropicMessages"]
