"""What a candidate kernel may import: the reviewed lean launch path and the CUDA extension loader.

Nothing here imports the rest of kda, so a solution that imports it pulls in no harness code."""
