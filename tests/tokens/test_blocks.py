"""`tokens.blocks`: Anthropic image, document, tool_use and tool_result blocks in a count."""

from __future__ import annotations

import base64

from shared_tokens import counter_for

from proxy.tokens import blocks


def test_pdf_pages_are_its_page_objects() -> None:
    pdf = b"%PDF /Type /Pages /Type /Page a /Type/Page b"
    assert blocks.pdf_pages(base64.b64encode(pdf).decode()) == 2
    assert blocks.pdf_pages("not base64 !!") >= 1


def test_anthropic_images_and_documents_are_counted_never_as_base64_text() -> None:
    counter = counter_for("x", "estimate")
    user = counter.count_message({"role": "user", "content": []})  # framing and role
    data = base64.b64encode(b"\x89PNG" + b"\x00" * 300_000).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    message = {"role": "user", "content": [image]}
    assert counter.count_message(message) == user + blocks.ANTHROPIC_IMAGE_TOKENS
    pdf = b"%PDF-1.4 /Type /Pages /Type /Page x /Type /Page y /Type/Page z" + b"\x00" * 100_000
    document = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(pdf).decode(),
        },
    }
    assert counter.count_message({"role": "user", "content": [document]}) == (
        user + 3 * blocks.DOCUMENT_PAGE_TOKENS
    )
    result = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [image, {"type": "text", "text": "hello"}],
    }
    assert counter.count_message({"role": "user", "content": [result]}) == (
        user + 3 + blocks.ANTHROPIC_IMAGE_TOKENS + counter.count_text("hello")
    )
    call = {"type": "tool_use", "id": "t", "name": "bash", "input": {"cmd": "ls"}}
    assistant = counter.count_message({"role": "assistant", "content": []})
    assert counter.count_message({"role": "assistant", "content": [call]}) > assistant + 3
