"""The judge layer: (vision-)language models asked to rate captions.

- :mod:`.backends`: the request/answer types and the backend interface; three backends,
  :mod:`.transformers_llava` (LLaVA-1.5/1.6 in ``transformers``, token log-probabilities from
  the model itself), :mod:`.transformers_text` (a text-only chat LLM in ``transformers``, CLAIR's
  local backend; folder identity in :mod:`.model_id`) and :mod:`.openai_compat` (any
  OpenAI-compatible server, log-probabilities from its ``logprobs``/``top_logprobs``);
- :mod:`.cache`: the content-addressed answer cache (image, prompt, model, decoding), resumable;
- :mod:`.answers`: the judges' answer-parsing rules side by side (CLAIR's JSON, FLEUR/EXPERT's
  real number and score smoothing); VisCE2's are in :mod:`capeval.metrics.visce2.parse`;
- :mod:`.options`: building a backend from the common options, and the one generation path of
  every judge (:func:`.options.request_key`, :func:`.options.answers`);
- :mod:`.templates`: LLaVA's ``llava_v1`` conversation; :mod:`.images`: image identity and encoding.

The judges: :mod:`capeval.metrics.visce2`, :mod:`capeval.metrics.clair`,
:mod:`capeval.metrics.fleur` (``fleur``, ``ref-fleur``, ``expert``). Importing loads nothing heavy.
"""
