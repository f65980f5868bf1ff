"""The verdicts flowrate wrote, as the platform's own client shows them, run with the `platforms`
extra's Python: `python read.py phoenix|mlflow URL PLACE SESSIONS_JSON` prints, for each session,
the annotations (Phoenix) or assessments (MLflow) on it, as JSON.

- Phoenix: arize-phoenix-client 3.5 writes session annotations but has no reader of them, so its
  `Client`'s own HTTP session (its base URL and headers) asks the server's documented
  `GET /v1/projects/{project}/session_annotations`.
- MLflow: `MlflowClient.search_traces` over the experiment, each trace's `info.assessments`."""

import json
import sys


def phoenix(url, project, sessions):
    from phoenix.client import Client

    client = Client(base_url=url)
    found = {session: [] for session in sessions}
    answer = client._client.get(
        f"v1/projects/{project}/session_annotations", params={"session_ids": sessions, "limit": 1000}
    )
    answer.raise_for_status()
    for annotation in answer.json()["data"]:
        found[annotation["session_id"]].append(
            {
                "id": annotation["id"],
                "name": annotation["name"],
                "annotator_kind": annotation["annotator_kind"],
                "identifier": annotation["identifier"],
                "label": annotation["result"]["label"],
                "score": annotation["result"]["score"],
                "explanation": annotation["result"]["explanation"],
                "metadata": annotation["metadata"],
                "updated_at": annotation["updated_at"],
            }
        )
    return found


def mlflow_assessments(url, experiment, sessions):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=url)
    found = {}
    for session in sessions:
        traces = client.search_traces(
            locations=[experiment],
            filter_string=f"metadata.`mlflow.trace.session` = '{session}'",
            order_by=["timestamp_ms DESC"],
        )
        found[session] = [
            {
                "trace_id": trace.info.trace_id,
                "last": number == 0,
                "id": assessment.assessment_id,
                "name": assessment.name,
                "value": assessment.feedback.value,
                "rationale": assessment.rationale,
                "source_type": assessment.source.source_type,
                "source_id": assessment.source.source_id,
                "metadata": assessment.metadata,
                "valid": assessment.valid,
            }
            for number, trace in enumerate(traces)
            for assessment in trace.info.assessments
        ]
    return found


def main():
    platform, url, place, sessions = sys.argv[1:5]
    read = {"phoenix": phoenix, "mlflow": mlflow_assessments}[platform]
    print(json.dumps(read(url, place, json.loads(sessions))))


if __name__ == "__main__":
    main()
