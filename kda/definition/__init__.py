"""Task definition: a task's config and workloads, the loaded task, and the files generated from templates."""
