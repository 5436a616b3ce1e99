"""The server-log split of bench/real_upstream (llama-cpp-python's own lines, as it prints them)."""

from __future__ import annotations

from dataclasses import dataclass

from bench.real_upstream.reeval import evaluated_by_label, floor_tokens, framed

LOG = """\
INFO:     127.0.0.1:43958 - "GET /v1/models HTTP/1.1" 200 OK
llama_perf_context_print: prompt eval time =       0.13 ms /   999 tokens (    0.00 ms per token)
INFO:     127.0.0.1:43960 - "GET /v1/models?ctxproxy_variant=direct HTTP/1.1" 200 OK
llama_perf_context_print:        load time =       0.53 ms
llama_perf_context_print: prompt eval time =       0.13 ms /   329 tokens (    0.00 ms per token)
llama_perf_context_print:        eval time =     247.00 ms /    40 runs   (    6.17 ms per token)
INFO:     127.0.0.1:52492 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 369 prefix-match hit, remaining 350 prompt tokens to eval
llama_perf_context_print: prompt eval time =       0.20 ms /   350 tokens (    0.00 ms per token)
INFO:     127.0.0.1:52492 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:43961 - "GET /v1/models?ctxproxy_variant=compact-extract HTTP/1.1" 200 OK
Llama.generate: 328 prefix-match hit, remaining 1 prompt tokens to eval
llama_perf_context_print: prompt eval time =       0.00 ms /     1 tokens (    0.00 ms per token)
INFO:     127.0.0.1:43962 - "GET /v1/models?ctxproxy_variant=end HTTP/1.1" 200 OK
"""


def test_each_marker_starts_a_conversation_and_collects_what_the_server_evaluated() -> None:
    evaluated = evaluated_by_label(LOG.splitlines())
    # before the first marker (the server's start-up probe and a warm-up) counts for nobody;
    # the `eval time` lines are generated tokens, not prompt tokens
    assert evaluated == {"direct": 329 + 350, "compact-extract": 1, "end": 0}


@dataclass
class _Ids:
    ids: list[int]


class _ByWord:
    """One token per whitespace-separated word: easy to count by hand."""

    def encode(self, text: str, add_special_tokens: bool = False) -> _Ids:
        return _Ids(list(range(len(text.split()))))


def test_the_floor_counts_each_message_once_with_its_framing() -> None:
    encoder = _ByWord()
    assert framed("user", "a b") == "<|im_start|>user\na b<|im_end|>\n"
    # framed, "s t" is 3 words (the role word joins the start tag, the end tag the last word);
    # each user message: its framed words + the generation prompt (1 word); from the second
    # request on, 2 tokens close the previous answer
    floor = floor_tokens(encoder, "s t", ["one two three", "four"])
    assert floor == 3 + (4 + 1) + (2 + 1 + 2)
