"""``zoo_data.store`` (the token store) under its old name ``zoo_train.data.store``."""

from zoo_data.store import BLOCK_BYTES as BLOCK_BYTES
from zoo_data.store import VERSION as VERSION
from zoo_data.store import Damage as Damage
from zoo_data.store import DamagedStoreError as DamagedStoreError
from zoo_data.store import HeldOut as HeldOut
from zoo_data.store import Mixture as Mixture
from zoo_data.store import RowLayout as RowLayout
from zoo_data.store import StoreLoader as StoreLoader
from zoo_data.store import TokenSplit as TokenSplit
from zoo_data.store import TokenStore as TokenStore
from zoo_data.store import VerifyReport as VerifyReport
from zoo_data.store import check_store as check_store
from zoo_data.store import describe_info as describe_info
from zoo_data.store import is_store as is_store
from zoo_data.store import layout as layout
from zoo_data.store import permute as permute
from zoo_data.store import prepare_store as prepare_store
from zoo_data.store import store_info as store_info
from zoo_data.store import tokenizer_identity as tokenizer_identity
from zoo_data.store import verify_store as verify_store
