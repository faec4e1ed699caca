"""flash_tpu tests run the real kernels in Pallas TPU interpret mode on the CPU."""

import os

os.environ["ZOO_FLASH_TPU_INTERPRET"] = "1"
