"""Reading training data: text files, directories, globs, JSON lines (plain, ``.gz``, ``.zst``),
Parquet and Arrow files, and ``datasets.save_to_disk`` directories, streamed document by document
(:class:`DocumentStream`) or record by record with every field (:func:`read_records`)."""

from ._files import InputFile as InputFile
from ._files import list_inputs as list_inputs
from ._read import DocumentStream as DocumentStream
from ._rows import Record as Record
from ._rows import read_records as read_records
from ._sniff import raw_holds_conversations as raw_holds_conversations
from ._sniff import raw_holds_pairs as raw_holds_pairs
from ._text import PIECE_CHARS as PIECE_CHARS
