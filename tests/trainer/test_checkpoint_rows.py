"""A checkpoint's TransferQueue state holds no pixels, and a run restored from it clears the rows its step trained
on, as verl's ``fit`` does right after the save (a real TransferQueue in the session's Ray cluster)."""

import pytest
import torch

pytestmark = pytest.mark.ray

PARTITION = "checkpoint_rows_test"


def _put(keys: list[str], with_pixels: bool) -> None:
    import transfer_queue as tq
    from tensordict import NonTensorStack, TensorDict

    inputs = [{"pixel_values": torch.ones(64, 12)} if with_pixels else {} for _ in keys]
    fields = TensorDict(
        {"multi_modal_inputs": NonTensorStack(*inputs), "advantages": torch.ones(len(keys), 4)}, batch_size=[len(keys)]
    )
    tq.kv_batch_put(keys=keys, partition_id=PARTITION, fields=fields, tags=[{"status": "finished"} for _ in keys])


def _pixels(keys: list[str]) -> list[bool]:
    import transfer_queue as tq

    data = tq.kv_batch_get(keys=keys, partition_id=PARTITION, select_fields=["multi_modal_inputs"])
    return ["pixel_values" in inputs for inputs in data["multi_modal_inputs"]]


def test_trained_rows_are_saved_without_pixels_and_cleared_on_restore(ray_cluster, tmp_path):
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta

    from verl_asyncweb.trainer.checkpoint_rows import clear_trained_rows, drop_pixels, write_trained_rows

    tq.init()
    trained, waiting = ["a_0_0", "a_1_0"], ["b_0_0"]
    _put(trained, with_pixels=True)
    _put(waiting, with_pixels=True)  # built ahead: AsyncWebTrainer unbuilds these through drop_pixels too
    drop_pixels(trained, PARTITION)
    assert _pixels(trained + waiting) == [False, False, True]

    checkpoint = tmp_path / "global_step_3"
    checkpoint.mkdir()
    tq.save_checkpoint(checkpoint / "transfer_queue")
    write_trained_rows(str(checkpoint), KVBatchMeta(partition_id=PARTITION, keys=trained, tags=[{}, {}]))
    tq.kv_clear(keys=trained + waiting, partition_id=PARTITION)  # verl clears the step's rows; the job ends

    tq.load_checkpoint(checkpoint / "transfer_queue")
    assert sorted(tq.kv_list(PARTITION)[PARTITION]) == sorted(trained + waiting)
    assert clear_trained_rows(str(checkpoint)) == 2
    assert sorted(tq.kv_list(PARTITION)[PARTITION]) == waiting, "the trained rows would be orphans: never sampled"
    assert clear_trained_rows(str(tmp_path)) == 0, "a checkpoint saved without the file restores as it is"
    tq.kv_clear(keys=waiting, partition_id=PARTITION)
