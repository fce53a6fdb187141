"""The per-item explorer: one self-contained, offline HTML page of a scoring run's items
(``capeval score --html``, ``capeval report RESULT.json --html``, ``capeval compare --html``).

See docs/explorer.md. :mod:`capeval.explorer.page` writes the page, :mod:`capeval.explorer.data`
turns results into its rows, :mod:`capeval.explorer.thumbs` makes the thumbnails and
:mod:`capeval.explorer.cli` connects it to the command line. Nothing here imports torch.
"""
