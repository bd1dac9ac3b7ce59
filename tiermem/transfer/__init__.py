"""Export a store to one JSON document and import it back: a full backup (R69).

:mod:`~tiermem.transfer.document` reads and writes the document, :mod:`~tiermem.transfer.rows`
holds its database sections, :mod:`~tiermem.transfer.files` its Markdown files.
"""

from tiermem.transfer.document import FORMAT, VERSION, ImportReport, export_data, import_data
from tiermem.transfer.outcome import ImportCounts, Restored
from tiermem.transfer.section import Restore

__all__ = ["FORMAT", "VERSION", "ImportCounts", "ImportReport", "Restore", "Restored", "export_data", "import_data"]
