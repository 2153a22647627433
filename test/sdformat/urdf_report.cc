// What Gazebo makes of a URDF: load it with libsdformat's own URDF parser (sdf::Root::Load, the
// path `ros_gz_sim create` takes when it spawns robot_description) and print the resulting model
// one fact per line, for test/sdformat_converter.py to read:
//
//   error: <message>                      every sdformat error, verbatim
//   model: <name>
//   link: <name> mass=<kg>
//   frame: <name> attached_to=<link>       links that fixed-joint reduction lumped into a parent
//   joint: <name> type=<revolute|...> parent=<link> child=<link>
//   plugin: filename=<file> name=<name> parameters=<text of its <parameters> child>
//
// Exit status: 0 converted without error, 1 no model, 2 converted with errors, 3 usage.
#include <iostream>
#include <string>

#include <sdf/sdf.hh>

namespace {

const char *joint_type(sdf::JointType type) {
  switch (type) {
    case sdf::JointType::BALL: return "ball";
    case sdf::JointType::CONTINUOUS: return "continuous";
    case sdf::JointType::FIXED: return "fixed";
    case sdf::JointType::GEARBOX: return "gearbox";
    case sdf::JointType::PRISMATIC: return "prismatic";
    case sdf::JointType::REVOLUTE: return "revolute";
    case sdf::JointType::REVOLUTE2: return "revolute2";
    case sdf::JointType::SCREW: return "screw";
    case sdf::JointType::UNIVERSAL: return "universal";
    default: return "invalid";
  }
}

std::string one_line(std::string text) {
  for (char &c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: urdf_report FILE.urdf\n";
    return 3;
  }
  sdf::Root root;
  const sdf::Errors errors = root.Load(argv[1], sdf::ParserConfig());
  for (const auto &error : errors) std::cout << "error: " << one_line(error.Message()) << "\n";
  const sdf::Model *model = root.Model();
  if (model == nullptr) {
    std::cout << "error: no model in the converted SDF\n";
    return 1;
  }
  std::cout << "model: " << model->Name() << "\n";
  for (uint64_t i = 0; i < model->LinkCount(); ++i) {
    const sdf::Link *link = model->LinkByIndex(i);
    std::cout << "link: " << link->Name() << " mass=" << link->Inertial().MassMatrix().Mass() << "\n";
  }
  for (uint64_t i = 0; i < model->FrameCount(); ++i) {
    const sdf::Frame *frame = model->FrameByIndex(i);
    std::cout << "frame: " << frame->Name() << " attached_to=" << frame->AttachedTo() << "\n";
  }
  for (uint64_t i = 0; i < model->JointCount(); ++i) {
    const sdf::Joint *joint = model->JointByIndex(i);
    std::cout << "joint: " << joint->Name() << " type=" << joint_type(joint->Type())
              << " parent=" << joint->ParentLinkName() << " child=" << joint->ChildLinkName() << "\n";
  }
  sdf::ElementPtr element = model->Element();
  for (sdf::ElementPtr plugin = element->HasElement("plugin") ? element->GetElement("plugin") : nullptr;
       plugin != nullptr; plugin = plugin->GetNextElement("plugin")) {
    std::string parameters;
    // <parameters> (gz_ros2_control's own child) is kept as an element with a string value.
    if (plugin->HasElement("parameters")) parameters = plugin->GetElement("parameters")->GetValue()->GetAsString();
    std::cout << "plugin: filename=" << plugin->Get<std::string>("filename")
              << " name=" << plugin->Get<std::string>("name") << " parameters=" << one_line(parameters) << "\n";
  }
  return errors.empty() ? 0 : 2;
}
