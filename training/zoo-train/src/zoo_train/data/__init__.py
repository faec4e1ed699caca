"""Data for training: documents, tokenizers, packing and the resumable loader."""

from ._chat import render_chat as render_chat
from ._documents import Document as Document
from ._documents import load_documents as load_documents
from ._loader import DataSource as DataSource
from ._loader import PackedLoader as PackedLoader
from ._loader import tokenize_documents as tokenize_documents
from ._loader import tokenize_examples as tokenize_examples
from ._packing import Batch as Batch
from ._packing import pack_documents as pack_documents
from ._packing import rows_to_batch as rows_to_batch
from ._split import split_documents as split_documents
from ._split import split_rows as split_rows
from ._stdlib import stdlib_corpus as stdlib_corpus
from ._tokenizer import Tokenizer as Tokenizer
from ._tokenizer import byte_tokenizer as byte_tokenizer
from ._tokenizer import leading_bos as leading_bos
