"""Drop-in replacements for other evaluation packages' APIs, computed by capeval.

:mod:`capeval.compat.pycocoevalcap`: pycocoevalcap 1.2's classes (``COCOEvalCap``,
``PTBTokenizer``, ``Bleu``, ``Meteor``, ``Rouge``, ``Cider``, ``Spice``) without Java.
Nothing is imported here.
"""
