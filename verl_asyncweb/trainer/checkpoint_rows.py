"""What a checkpoint's TransferQueue holds of the step it was saved at.

verl's ``fit`` saves a step's checkpoint (TransferQueue included, in the async trainers) before it clears the rows
that step trained on. Saved as they are, those rows would carry their rebuilt pixels into every checkpoint (for
Qwen-VL, a screenshot's ``pixel_values`` are ~1,000 times its JPEG), and a resumed run would find them again as
rows no step samples or clears, to be saved once more by every later checkpoint. So before the save their pixels
are dropped (the screenshot keys stay: pixels are rebuilt from them), their keys are written beside the
checkpoint, and a run resumed from it clears them, as verl would have right after the save.
"""

import json
import logging
import os

import transfer_queue as tq
from tensordict import NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta

logger = logging.getLogger(__name__)

TRAINED_ROWS_FILE = "asyncweb_trained_rows.json"


def drop_pixels(keys: list[str], partition_id: str) -> None:
    """Empty the ``multi_modal_inputs`` (the rebuilt pixels) of the rows ``keys``."""
    if keys:
        empty = TensorDict({"multi_modal_inputs": NonTensorStack(*({} for _ in keys))}, batch_size=[len(keys)])
        tq.kv_batch_put(keys=list(keys), partition_id=partition_id, fields=empty)


def write_trained_rows(checkpoint_dir: str, batch: KVBatchMeta) -> None:
    """Name ``batch``'s rows (the saved step's, cleared after the save) beside the checkpoint in ``checkpoint_dir``."""
    rows = {"partition_id": batch.partition_id, "keys": list(batch.keys)}
    with open(os.path.join(checkpoint_dir, TRAINED_ROWS_FILE), "w") as out:
        json.dump(rows, out)


def clear_trained_rows(checkpoint_dir: str) -> int:
    """After TransferQueue was restored from the checkpoint in ``checkpoint_dir``, clear the rows its step trained
    on; returns how many were still there (0 for a checkpoint without the file: saved before it existed)."""
    path = os.path.join(checkpoint_dir, TRAINED_ROWS_FILE)
    if not os.path.exists(path):
        return 0
    with open(path) as rows_file:
        rows = json.load(rows_file)
    partition_id = rows["partition_id"]
    live = (tq.kv_list(partition_id) or {}).get(partition_id, {})
    keys = [key for key in rows["keys"] if key in live]
    if keys:
        tq.kv_clear(keys=keys, partition_id=partition_id)
    logger.info("resume: cleared %d rows the checkpoint's step trained on", len(keys))
    return len(keys)
