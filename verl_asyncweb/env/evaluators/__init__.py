"""Episode evaluators: programmatic (MiniWoB++ raw reward, bundled-site verifiers) and the WebGym rubric judge."""

from verl_asyncweb.env.evaluators.programmatic import evaluate_programmatic

__all__ = ["RubricJudge", "evaluate_programmatic"]


def __getattr__(name: str):
    if name == "RubricJudge":  # imports aiohttp; keep the package import cheap
        from verl_asyncweb.env.evaluators.judge import RubricJudge

        return RubricJudge
    raise AttributeError(name)
