"""Request records: what each completion did (`build`), written off the response path
(`recorder`), and summed up per tenant and policy (`aggregate`)."""
