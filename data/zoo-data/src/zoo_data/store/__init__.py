"""The token store: data tokenized once (``prepare_store``), read by row index
(``TokenStore``, ``StoreLoader``), the same batches on any number of processes."""

from ._blocks import BLOCK_BYTES as BLOCK_BYTES
from ._blocks import DamagedStoreError as DamagedStoreError
from ._format import STORE_FORMAT_VERSION as STORE_FORMAT_VERSION
from ._format import VERSION as VERSION
from ._format import is_store as is_store
from ._identity import tokenizer_identity as tokenizer_identity
from ._info import describe_info as describe_info
from ._info import store_info as store_info
from ._mixture import Mixture as Mixture
from ._order import permute as permute
from ._prepare import prepare_store as prepare_store
from ._reader import RowLayout as RowLayout
from ._reader import TokenSplit as TokenSplit
from ._reader import TokenStore as TokenStore
from ._reader import layout as layout
from ._scan import Damage as Damage
from ._scan import VerifyReport as VerifyReport
from ._scan import verify_store as verify_store
from ._store_loader import HeldOut as HeldOut
from ._store_loader import StoreLoader as StoreLoader
from ._verify import check_store as check_store
