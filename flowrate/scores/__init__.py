"""The scores stage: what the judge is asked to reply (`schema`) and a reply read into ratings on
the rubric's scales, with repair, re-ask reasons and the majority of samples (`reading`)."""
