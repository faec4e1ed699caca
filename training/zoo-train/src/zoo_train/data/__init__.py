"""zoo-data's public names, where zoo-train had them: the data pipeline and the token store
moved to the JAX-free package ``zoo_data`` (import it directly in new code); ``zoo_train.data``,
``zoo_train.data.store`` and ``zoo_train.data.inputs`` keep working for existing code."""

from zoo_data import Batch as Batch
from zoo_data import DataSource as DataSource
from zoo_data import Document as Document
from zoo_data import DocumentStream as DocumentStream
from zoo_data import HeldOut as HeldOut
from zoo_data import PackedLoader as PackedLoader
from zoo_data import StoreLoader as StoreLoader
from zoo_data import Tokenizer as Tokenizer
from zoo_data import TokenStore as TokenStore
from zoo_data import byte_tokenizer as byte_tokenizer
from zoo_data import check_store as check_store
from zoo_data import holds_pairs as holds_pairs
from zoo_data import is_byte_level as is_byte_level
from zoo_data import is_store as is_store
from zoo_data import leading_bos as leading_bos
from zoo_data import load_documents as load_documents
from zoo_data import pack_documents as pack_documents
from zoo_data import prepare_store as prepare_store
from zoo_data import render_chat as render_chat
from zoo_data import rows_to_batch as rows_to_batch
from zoo_data import skipped_sentence as skipped_sentence
from zoo_data import split_documents as split_documents
from zoo_data import split_rows as split_rows
from zoo_data import stdlib_corpus as stdlib_corpus
from zoo_data import stdlib_files as stdlib_files
from zoo_data import store_info as store_info
from zoo_data import tokenize_documents as tokenize_documents
from zoo_data import tokenize_examples as tokenize_examples

from . import inputs as inputs
from . import store as store
