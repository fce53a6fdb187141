"""The FACTUAL parser's input cut in capture-metric 0.1.13, copied (``parser_cut="package"``).

Read line by line in the installed packages:

- capture-metric 0.1.13, ``capture_metric/capture.py``, ``CAPTURE.sample_to_parse_results``: each
  caption (the candidate, and each reference on its own) is split by nltk's ``sent_tokenize``
  and its sentences go to the parser in one call, ``self.parser.parse(sentences, beam_size=5,
  return_text=False, max_output_len=128)``; so ``max_input_len`` and ``batch_size`` keep
  ``SceneGraphParser.parse``'s defaults, 64 and 32. The parser is ``SceneGraphParser(
  'lizhuang144/flan-t5-base-VG-factual-sg', ...)`` (``CAPTURE.parse_samples``) with the default
  ``parser_type``, so ``parse`` takes its "default flow": ``_process_text`` (the identity, as
  ``lemmatize`` and ``lowercase`` are off) and then ``_parse_batch`` on the sentences as they are
  (duplicates included, nothing skipped).
- FactualSceneGraph 0.7.3, ``factual_scene_graph/parser/scene_graph_parser.py``,
  ``SceneGraphParser._parse_batch``: for each chunk of ``batch_size`` (32) sentences in order,

  1. ``prompt_texts = ['Generate Scene Graph: ' + d.strip() for d in chunk]``;
  2. ``token_lens = [len(self.tokenizer.encode(p, add_special_tokens=False)) ...]`` inside
     ``with self.tokenizer.as_target_tokenizer():`` - lengths **without** T5's end token
     ``</s>`` (the context manager changes nothing for T5's single tokenizer; transformers 5
     removed it, so 0.7.3 fails there unless it is given a no-op);
  3. ``local_max_len = min(max_input_len, max(token_lens))``;
  4. ``self.tokenizer(prompt_texts, max_length=local_max_len, truncation=True,
     padding='longest', return_tensors='pt')`` - the limit now counts **with** ``</s>``, which
     the tokenizer appends after truncating the text to ``local_max_len - 1`` tokens;
  5. ``self.model.generate(input_ids, attention_mask=..., use_cache=True,
     decoder_start_token_id=pad_token_id, num_beams=5, max_length=128, early_stopping=True,
     num_return_sequences=1)``.

So in every chunk whose longest prompt has L <= 63 tokens (L without ``</s>``), each prompt of
that length L reaches the encoder as its first L - 1 tokens and ``</s>``: the caption's longest
sentence(s) lose their last token (usually the full stop, sometimes a word piece), the other
sentences are whole. When the longest has L >= 64 tokens, the limit is 64 as in capeval's
FACTUAL parser (63 tokens and ``</s>``) and nothing more is cut. :func:`package_input_lens`
gives each sentence of a caption the ``local_max_len`` of its chunk; the parser then truncates
each prompt to it exactly as step 4 does (:meth:`FactualParser.generate`, ``input_lens``).
``parser_cut="full"`` gives every sentence the plain 64-token limit (capeval before issue 47).
"""

from __future__ import annotations

from typing import Any, Sequence

#: ``-O capture.parser_cut=...``: the package's cut (default) or every sentence whole
PARSER_CUTS = ("package", "full")
#: ``SceneGraphParser.parse``'s default ``batch_size``, which CAPTURE does not change
PACKAGE_BATCH = 32


def package_input_lens(tokenizer: Any, sentences: Sequence[str], max_input_len: int = 64,
                       batch_size: int = PACKAGE_BATCH) -> list[int]:
    """The ``max_length`` FactualSceneGraph 0.7.3's ``_parse_batch`` truncates each of one
    caption's ``sentences`` to: per chunk of ``batch_size``, ``min(max_input_len, longest
    prompt in tokens without the end token)``."""
    from capeval.metrics.hice.factual import PROMPT

    out: list[int] = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start: start + batch_size]
        lens = [len(tokenizer.encode(PROMPT + s.strip(), add_special_tokens=False)) for s in chunk]
        out.extend([min(int(max_input_len), max(lens))] * len(chunk))
    return out
