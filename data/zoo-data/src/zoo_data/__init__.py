"""zoo_data: data for training language models, without JAX. Documents, tokenizers (byte-level
and ``tokenizer.json``), chat templates, packing, the resumable loader, and the token store
(`prepare_store`, `TokenStore`, `StoreLoader`) that streams data larger than memory.

``STORE_FORMAT_VERSION`` is the newest token-store format this package writes and reads; it is
zoo-data's contract with every reader of a store (a change of it is a zoo-data minor or major
release).
"""

from ._chat import PLAIN_CHAT_TEMPLATE as PLAIN_CHAT_TEMPLATE
from ._chat import render_chat as render_chat
from ._chat_template import ChatTemplate as ChatTemplate
from ._chat_template import ChatTemplateError as ChatTemplateError
from ._chat_template import RenderedChat as RenderedChat
from ._documents import Document as Document
from ._documents import load_documents as load_documents
from ._holds_pairs import holds_pairs as holds_pairs
from ._output_paths import check_output_path as check_output_path
from ._output_paths import system_directory as system_directory
from ._packed_loader import DataSource as DataSource
from ._packed_loader import PackedLoader as PackedLoader
from ._packed_loader import tokenize_documents as tokenize_documents
from ._packed_loader import tokenize_examples as tokenize_examples
from ._packing import Batch as Batch
from ._packing import pack_documents as pack_documents
from ._packing import rows_to_batch as rows_to_batch
from ._pairs import skipped_sentence as skipped_sentence
from ._split import split_documents as split_documents
from ._split import split_rows as split_rows
from ._stdlib import stdlib_corpus as stdlib_corpus
from ._stdlib import stdlib_files as stdlib_files
from ._tokenizer import Tokenizer as Tokenizer
from ._tokenizer import byte_tokenizer as byte_tokenizer
from ._tokenizer import is_byte_level as is_byte_level
from ._tokenizer import leading_bos as leading_bos
from ._tokenizers import ByteTokenizer as ByteTokenizer
from ._tokenizers import HFTokenizer as HFTokenizer
from ._tokenizers import ZooTokenizer as ZooTokenizer
from ._tokenizers import load_tokenizer as load_tokenizer
from .inputs import DocumentStream as DocumentStream
from .inputs import Record as Record
from .inputs import read_records as read_records
from .store import STORE_FORMAT_VERSION as STORE_FORMAT_VERSION
from .store import HeldOut as HeldOut
from .store import StoreLoader as StoreLoader
from .store import TokenStore as TokenStore
from .store import check_store as check_store
from .store import is_store as is_store
from .store import prepare_store as prepare_store
from .store import store_info as store_info

__version__ = "0.1.0.dev0"
