"""The judge stage: one model call. A backend makes the call (`backend`, `litellm_backend`); retries
(`retry`), rate ceilings and the stop switch (`limits`), the response cache (`cache`) and the
provider's Files and Batches API (`batch_api`) wrap it, as inspect_ai's `Model._generate` wraps
`ModelAPI.generate`. `server` asks a self-hosted server what it is."""
