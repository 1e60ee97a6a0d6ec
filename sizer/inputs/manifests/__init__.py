"""Readers of the manifests `sizer check` takes, one module per family, each importing only those above it:

  fields       the manifest fields sizer reads, declared once (`Key`s), and numbers written as text
  commands     a container's command line (argv, `sh -c` scripts, `$(VAR)` from its env) and the server it
               runs: `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, `sglang.launch_server`,
               `trtllm-serve`, each mapped to scenario deployment fields
  gpus         the GPU a pod runs on from node labels, instance types and MIG resource names (tables, sourced)
  kubernetes   where the serving container is in Kubernetes objects (Deployment, StatefulSet, Pod, Job,
               LeaderWorkerSet, KServe InferenceService and ServingRuntime) and what a replica is
  operators    resources of serving operators that write the pods (KServe LLMInferenceService, Ray Serve
               LLM in a RayService, NVIDIA Dynamo DynamoGraphDeployment), read as the server they run
  helm_charts  the values of Helm charts that write those objects themselves (vLLM production-stack,
               llm-d modelservice), read as the containers the chart would write

`sizer/inputs/manifest.py` reads a file with them and adds the `sizer:` block and the flags.
"""
