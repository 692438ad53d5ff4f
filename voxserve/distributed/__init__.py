"""Scale-out on Ray: model replicas as actors, chunks of one long file fanned out over them, sticky live
streams, fault recovery, and the capacity planner.

Nothing here imports Ray at import time: without the ``[ray]`` extra everything else runs in one process.

* :mod:`.replica`: the actor body, one model and its own :class:`~voxserve.engine.batcher.MicroBatcher`.
* :mod:`.router`: :class:`~.router.RayRecognizer`, the ``Recognizer`` the pipelines and streams use.
* :mod:`.cluster`: joining or starting Ray, resources per replica, :class:`~.cluster.ReplicaPool`.
* :mod:`.hashring`: consistent hashing of live streams onto replicas.
* :mod:`.planner`: replicas, GPUs and MIG slices needed for a target, from measured results.
"""
