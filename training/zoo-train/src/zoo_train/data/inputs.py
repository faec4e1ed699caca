"""``zoo_data.inputs`` (reading training data) under its old name ``zoo_train.data.inputs``."""

from zoo_data.inputs import PIECE_CHARS as PIECE_CHARS
from zoo_data.inputs import DocumentStream as DocumentStream
from zoo_data.inputs import InputFile as InputFile
from zoo_data.inputs import list_inputs as list_inputs
from zoo_data.inputs import raw_holds_pairs as raw_holds_pairs
