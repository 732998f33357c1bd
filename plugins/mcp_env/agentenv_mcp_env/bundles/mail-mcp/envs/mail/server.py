"""The mail env: a fixed inbox of three messages and a search tool."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool

INBOX = [
    {"id": "m-1", "from": "billing@acme.example", "subject": "Invoice #1042 for March",
     "body": "Please find attached invoice 1042. Payment is due within 30 days."},
    {"id": "m-2", "from": "sam@friends.example", "subject": "Lunch on Friday?",
     "body": "Shall we try the new noodle place near the office?"},
    {"id": "m-3", "from": "it@acme.example", "subject": "Password expiry notice",
     "body": "Your password expires in 5 days. Change it from the account page."},
]


def matches(message, words):
    text = " ".join((message["from"], message["subject"], message["body"])).lower()
    return all(word in text for word in words)


@environment_card(name="mail", description="A small read-only inbox.")
class MailEnv(AgentEnvEnvironment):
    @tool(name="search_emails")
    def search_emails(self, query: str) -> dict:
        """Messages whose sender, subject or body contain every word of the query."""
        words = query.lower().split()
        found = [m for m in INBOX if matches(m, words)]
        return {"count": len(found), "messages": found}


if __name__ == "__main__":
    MailEnv().serve()
