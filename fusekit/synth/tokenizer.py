"""A small byte-level BPE tokenizer (llama.cpp's ``gpt2`` model) built in code, padded to any vocab size.

All 256 bytes are tokens (GPT-2's byte-to-unicode alphabet), so every text tokenizes; merges are
learned from the bundled sample text, so common words become single tokens; the padding tokens
(``[pad123]``) are reachable by no merge and only ever appear as model outputs.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SAMPLE_TEXT = Path(__file__).with_name("sample.txt")
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3
_WORDS = re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+")


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    types: list[int]
    merges: list[str]
    eos_id: int

    def __len__(self) -> int:
        return len(self.tokens)


@cache
def byte_alphabet() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each byte value (index = byte)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


def _encode_word(word: str) -> tuple[str, ...]:
    alphabet = byte_alphabet()
    return tuple(alphabet[b] for b in word.encode())


def learn_merges(text: str, count: int) -> list[tuple[str, str]]:
    """Greedy BPE: repeatedly merge the most frequent adjacent pair (ties broken by the pair itself)."""
    words = Counter(_encode_word(w) for w in _WORDS.findall(text))
    merges: list[tuple[str, str]] = []
    while len(merges) < count:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, freq in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += freq
        if not pairs:
            break
        top = max(pairs.values())
        best = min(p for p, c in pairs.items() if c == top)
        if pairs[best] < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        merged: Counter[tuple[str, ...]] = Counter()
        for word, freq in words.items():
            if best[0] not in word or best[1] not in word:
                merged[word] += freq
                continue
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        words = merged
    return merges


@cache
def _sample_merges(count: int) -> tuple[tuple[str, str], ...]:
    return tuple(learn_merges(SAMPLE_TEXT.read_text(), count))


def build_vocab(size: int, max_merges: int = 600) -> Vocab:
    """256 byte tokens, up to ``max_merges`` learned merges, the special tokens, then padding to ``size``."""
    n_merges = max(0, min(max_merges, size - 256 - len(SPECIALS)))
    merges = _sample_merges(n_merges)[:n_merges]
    tokens = list(byte_alphabet()) + [a + b for a, b in merges]
    tokens = list(dict.fromkeys(tokens))  # a merge result can repeat a token; keep each once
    types = [TOKEN_NORMAL] * len(tokens)
    eos_id = len(tokens)
    tokens += SPECIALS
    types += [TOKEN_CONTROL] * len(SPECIALS)
    if len(tokens) > size:
        raise ValueError(f"vocab size {size} is below the {len(tokens)} tokens the tokenizer needs")
    pad = size - len(tokens)
    tokens += [f"[pad{i}]" for i in range(pad)]
    types += [TOKEN_NORMAL] * pad
    return Vocab(tokens, types, [f"{a} {b}" for a, b in merges], eos_id)
