"""The two tiktoken encodings the workbench counts with, as published by OpenAI: the
regular expression that splits text before byte-pair merging, the special tokens, and
the SHA-256 of each vocabulary file (``<base64 token> <rank>`` lines).

They are written out here so that an encoding is built from the vocabulary file a
package ships, through tiktoken's public ``Encoding`` constructor, without asking
tiktoken for its own definition (which would fetch the file from the network). A test
checks them against the definitions of the installed tiktoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class EncodingDefinition:
    """What an encoding is besides its vocabulary."""

    name: str
    pattern: str
    special_tokens: dict[str, int] = field(default_factory=dict)
    sha256: str = ""
    vocabulary_size: int | None = None  # not fixed by the definition: the file decides


_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

# Letters in runs of upper then lower case (or the reverse) with an English contraction,
# numbers in threes, punctuation runs, line breaks, then other whitespace.
_O200K_PARTS = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
)

ENCODING_DEFINITIONS: dict[str, EncodingDefinition] = {
    "cl100k_base": EncodingDefinition(
        name="cl100k_base",
        pattern=_CL100K_PATTERN,
        special_tokens={ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259,
                        FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": EncodingDefinition(
        name="o200k_base",
        pattern="|".join(_O200K_PARTS),
        special_tokens={ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
